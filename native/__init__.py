"""Kernels shared by the plugins: one numba source per algorithm, compiled for the CPU
(``njit``) and for CUDA (``numba.cuda.jit``); bulk primitives come from NumPy/CuPy.

Nothing here imports numba.cuda or CuPy until a kernel runs on the ``cuda`` device.
"""
