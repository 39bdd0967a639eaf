# A PyTorch whose import never returns (a CUDA initialisation that hangs).
import time

time.sleep(3600)
