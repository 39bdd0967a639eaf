# A PyTorch without a usable GPU, as on a machine with CUDA libraries but no device.
__version__ = "0.0-nocuda"


class version:  # noqa: N801  (torch.version)
    cuda = "13.0"


class cuda:  # noqa: N801  (torch.cuda)
    @staticmethod
    def is_available():
        return False

    @staticmethod
    def device_count():
        return 0
