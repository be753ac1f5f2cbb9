"""Run agent-lab's command line from a checkout: `python run_lab.py tool-eval` (see README.md)."""
from agent_lab.cli import run

if __name__ == "__main__":  # not when a spawned process (the stores bench) imports this file again
    run()
