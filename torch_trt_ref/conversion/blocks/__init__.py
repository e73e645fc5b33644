"""The building blocks converters share (DESIGN.md D12): converters import these modules,
never another converter. One name per concept:

- ``nodes``: a node's ATen arguments by name (``node_args``), the FakeTensor of an argument
  (``fake``), ``int_sizes``, used extra outputs; shared validators (``plain_dtypes_ok``,
  ``float_only``, ``floating_point_input_ok``, ``float_operands_ok``, ``strided_ok``,
  ``all_of``).
- ``elementwise``: ``tensor``, ``binary``, ``select`` (ITensors of one dtype),
  ``to_bool``, ``is_negative``, ``trunc``, ``floor_divide``, ``trunc_divide``, ``opmath``.
- ``reduce``: ``reduce``, ``reduce_dims``, ``arange``, ``positions``, ``where`` (scalars
  allowed, promoted).
- ``shape``: rank changes, channel vectors, ``slice_dim``, ``pad_slice``, ``squeeze_dims``,
  ``repeat_tensor``, ``repeat_heads``, ``index_vector``.
- ``index``: ``gather``, ``wrap_negative_indices``, ``broadcast_dims``, ``scatter_elements``,
  ``scatter_reduce_sum``, ``filled``, ``topk_layer``.
- ``linalg``: ``MAT``, ``matmul``, ``mask_future``, ``attention``.
- ``quantize``: ``qdq``, ``quantize_activation``, ``constant_value``, ``MAX_VALUE``,
  ``TRT_TYPE``.

Lower-level helpers (ITensor casts, reshapes, constants) are ``conversion.helpers`` and
``conversion.dims``."""
