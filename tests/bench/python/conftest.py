# The bench package lives in tools/bench (its scripts find it next to themselves).
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..",
                                "tools", "bench"))
