"""The embedded backend: llama-cpp-python in this process. The only package that imports the binding."""
