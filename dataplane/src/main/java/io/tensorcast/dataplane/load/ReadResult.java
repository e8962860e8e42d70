package io.tensorcast.dataplane.load;

import java.time.Duration;

/**
 * What a successful {@link ParallelRangeReader} read did.
 *
 * @param files files with at least one byte (zero-length files need no request)
 * @param ranges ranges read
 * @param bytes bytes delivered to the sink: the sum of the files' sizes
 * @param requests ranged requests opened, first attempts and retries together
 * @param retries requests that were retries or resumes
 * @param elapsed wall time of the read
 */
public record ReadResult(
    int files, int ranges, long bytes, long requests, long retries, Duration elapsed) {}
