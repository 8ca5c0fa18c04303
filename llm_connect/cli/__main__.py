"""``python -m llm_connect.cli``: the same as the ``llm-connect`` command."""

from . import main

raise SystemExit(main())
