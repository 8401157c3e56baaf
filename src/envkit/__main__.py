from envkit.cli import run

run()
