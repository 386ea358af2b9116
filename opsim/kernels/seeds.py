"""The hash seeds shared by the Python hashes (opsim.kernels.hashing) and their compiled twins
(opsim.kernels.hashing_jit), in a module of their own so that neither imports the other back."""

#: kHashSeed of AicpuTaskSpace: the golden-ratio mixing constant of boost's hash_combine.
K_HASH_SEED = 0x9E3779B9
#: Seed of the op-exec-cache bucket hash.
MURMUR_SEED = 0xDEADB0D7
