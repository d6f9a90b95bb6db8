"""`python -m tfspark.cli ...`: the same as the `tfspark` command."""

from tfspark.cli.main import main

if __name__ == "__main__":
    raise SystemExit(main())
