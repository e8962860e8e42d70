/**
 * The safetensors format: a strict header reader and a writer in the reference layout.
 *
 * <p>A file is an 8-byte little-endian u64 header length N, N bytes of UTF-8 JSON, then the data
 * section (huggingface/safetensors). {@link
 * io.tensorcast.dataplane.format.safetensors.SafetensorsHeader} reads and validates a header so
 * that every declared size is checked against shape × dtype, against neighbouring tensors and
 * against the file's real size before any byte is trusted; {@link
 * io.tensorcast.dataplane.format.safetensors.SafetensorsFormatException} names the file, tensor and
 * rule of any refusal. {@link io.tensorcast.dataplane.format.safetensors.SafetensorsWriter} writes
 * files (streaming or from buffers) byte-identical to the reference writer's for the same order.
 */
package io.tensorcast.dataplane.format.safetensors;
