//! [`written`]: the bytes a process passed to write(2) and its kin (`wchar` of `/proc/self/io`),
//! what the issue-45 benches (`checkpoint_bytes`, `fleet`) count as written.

/// Bytes this process has passed to write(2) and its kin so far.
pub fn written() -> u64 {
    let io = std::fs::read_to_string("/proc/self/io").expect("/proc/self/io (Linux)");
    io.lines()
        .find_map(|line| line.strip_prefix("wchar: "))
        .and_then(|n| n.trim().parse().ok())
        .expect("a wchar line")
}
