"""``torch.distributed.rpc.api``: its calls raise, naming the missing RPC framework."""

from .._unsupported import unsupported_class, unsupported_function

init_rpc = unsupported_function("rpc.init_rpc", "rpc")
shutdown = unsupported_function("rpc.shutdown", "rpc")
rpc_sync = unsupported_function("rpc.rpc_sync", "rpc")
rpc_async = unsupported_function("rpc.rpc_async", "rpc")
remote = unsupported_function("rpc.remote", "rpc")
get_worker_info = unsupported_function("rpc.get_worker_info", "rpc")
RRef = unsupported_class("rpc.RRef", "rpc", __name__)
TensorPipeRpcBackendOptions = unsupported_class("rpc.TensorPipeRpcBackendOptions", "rpc", __name__)
