"""What people read of a run: report.md, summary.md, junit.xml and the offline report.html (jinja2
templates, matplotlib charts, the drill-down), the files a run publishes, and what the commands print."""
