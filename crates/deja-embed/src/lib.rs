//! Local embeddings with fastembed and a dynamically loaded ONNX Runtime, offline.
