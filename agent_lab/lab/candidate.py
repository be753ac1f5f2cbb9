"""Moved to `agent_lab.lab.tickets.candidate` (the ticket lab); this name keeps older imports working."""

from .tickets.candidate import *  # noqa: F401,F403
from .tickets.candidate import __all__  # noqa: F401
