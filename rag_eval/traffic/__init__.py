"""Production traffic without labels: query logs and traces read as queries, the label-free comparison's
overlap measures, and the labelling file of the queries the configs disagree on most."""
