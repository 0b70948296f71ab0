"""Runs a command and prints its peak resident set size in MiB (getrusage of the child; Linux reports KiB)."""
import resource
import subprocess
import sys

result = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
if result.returncode != 0:
    sys.exit(f"command failed ({result.returncode}): {result.stderr}")
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024)
