"""A `horovod` package under which Horovod's own tests run against hcoll.

`horovod.torch` (shim/horovod/torch) is hcoll.torch; every other subpackage the tests' helper
modules import (e.g. `horovod.runner.util.threads`) is found in the Horovod checkout named by
$HOROVOD_SOURCE, which this package adds to its path. Nothing of Horovod is copied here.
"""

import os

_source = os.environ.get("HOROVOD_SOURCE")
if _source:
    __path__.append(os.path.join(_source, "horovod"))
