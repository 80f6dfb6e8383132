# A python3 program whose one thread does one thing, then another: for each
# letter of argv[1], argv[2] seconds of zlib compression (z) or of sha256
# (h).  Its native stacks tell the phases apart (zlib_compress, deflate;
# _hashlib_openssl_sha256), so a profile in time order shows them in order.
import hashlib
import sys
import time
import zlib

data = bytes(range(256)) * 4096
for phase in sys.argv[1]:
    end = time.monotonic() + float(sys.argv[2])
    while time.monotonic() < end:
        if phase == "z":
            zlib.compress(data, 6)
        else:
            hashlib.sha256(data).digest()
