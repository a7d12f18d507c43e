"""The hardware model of the simulated device: profiles (op tables, dtypes, known issues), their cited sources and
generator, real-hardware observations, the compiler's matmul auto-cast table and the process group's collective
tables. Data and pure Python over torch's dtypes and op names; it imports nothing else of neuron_backend (the PyTorch
glue around it reads it), as torch_openreg keeps third_party/openreg apart from csrc/.
"""
