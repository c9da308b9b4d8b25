"""Where libsbsh was installed. `cmake --install` and the Debian package put their own copy
of this file beside the package, naming the library's directory; a package built by pip
from the sources knows none (None) and finds libsbsh through the system's loader."""
from typing import Optional

LIBDIR: Optional[str] = None
