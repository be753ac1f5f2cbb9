"""`python -m agent_lab ...` runs the same command line as run_lab.py."""
from agent_lab.cli import run

run()
