__version__ = "0.1.0"

# what ``torch.version`` tells of a build: fusegrad has no CUDA, ROCm or XPU
# toolkit, and is not built from a git checkout of PyTorch
cuda = None
hip = None
rocm = None
xpu = None
debug = False
git_version = "Unknown"
