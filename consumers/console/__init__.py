"""The console: server-rendered pages for reading the evidence in a browser (DESIGN decision 22).

:func:`console_router` is an ``APIRouter`` over the runtime's services (the access gate, the index,
the stored-capture reader, verify); the one application includes it. Templates and the stylesheet
ship inside the package (``templates/``, ``static/``).
"""

from consumers.console.router import console_router
from consumers.console.sessions import ConsoleSessions, console_file

__all__ = ["ConsoleSessions", "console_file", "console_router"]
