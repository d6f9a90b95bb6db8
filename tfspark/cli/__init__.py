"""The command line (`tfspark ...`, main.py) and the jobs' settings (config.py): the top tier,
which may import every other."""
