"""The command line (`tfspark ...`, cli.main) and the jobs' settings (cli.config): the top tier,
which may import every other."""
