"""Run agent-lab's command line from a checkout: `python run_lab.py tool-eval` (see README.md)."""
from agent_lab.cli import main

raise SystemExit(main())
