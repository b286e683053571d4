"""Software ray tracing: a BVH over primitive bounds and one-source traversal kernels."""
