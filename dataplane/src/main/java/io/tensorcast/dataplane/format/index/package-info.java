/**
 * Index files of sharded checkpoints ({@code model.safetensors.index.json}, {@code
 * pytorch_model.bin.index.json}, as Hugging Face {@code save_pretrained} writes them): a strict
 * parser ({@link io.tensorcast.dataplane.format.index.ShardIndex}) and the check of an index
 * against the artifact's files and their headers ({@link
 * io.tensorcast.dataplane.format.index.IndexCheck}). Refusals are {@link
 * io.tensorcast.dataplane.format.index.IndexFormatException}s naming the file, the position or the
 * missing name, and the rule.
 */
package io.tensorcast.dataplane.format.index;
