"""Reference layer functions, one small function per TensorRT layer kind. Importing this
package registers them all."""

from . import (  # noqa: F401
    attention_ops,
    control_flow,
    index_ops,
    math_ops,
    nn_extra_ops,
    nn_ops,
    plugin_ops,
    quantize_ops,
    tensor_ops,
)
