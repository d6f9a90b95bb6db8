"""`python -m tfspark.cli ...`: the same as the `tfspark` command."""

from tfspark.cli.main import main

raise SystemExit(main())
