"""``python -m gpuportal``: the same as the ``gpuportal`` console script."""

from gpuportal.app import main

main()
