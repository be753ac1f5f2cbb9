"""Moved to `agent_lab.lab.tickets.world` (the ticket lab); this name keeps older imports working."""

from .tickets.world import *  # noqa: F401,F403
from .tickets.world import __all__  # noqa: F401
