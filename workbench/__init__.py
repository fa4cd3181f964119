"""The porting workbench: the library behind the notebooks and the `ascend-workbench` command.

Importing it first guards torch's autoload of torch_npu (`ascend_backend.platform.autoload`): on a machine
where torch_npu is installed but cannot load (CANN not sourced, the driver not mounted), `import torch`
then stays usable and the pre-flight reports the cause instead of dying inside torch's import.
"""

from ascend_backend.platform import autoload as _autoload

_autoload.install()
