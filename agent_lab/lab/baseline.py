"""Moved to `agent_lab.lab.tickets.baseline` (the ticket lab); this name keeps older imports working."""

from .tickets.baseline import *  # noqa: F401,F403
from .tickets.baseline import __all__  # noqa: F401
