"""``python -m rag_eval.datasets.quotes SRC_DIR OUT_DIR [--split test]``."""

import sys

from rag_eval.datasets.quotes.build import main

sys.exit(main())
