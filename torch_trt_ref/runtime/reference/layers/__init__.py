"""Reference layer functions, one small function per TensorRT layer kind. Importing this
package registers them all."""

from . import index_ops, math_ops, nn_extra_ops, nn_ops, tensor_ops  # noqa: F401
