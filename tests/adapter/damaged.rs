//! Damaged copies of a message, for decoders that must answer them with an error or a value,
//! never a panic.

/// Calls `f` with every cut of `bytes` short of the whole and with `bytes` with each byte flipped:
/// every position in the first 4 KB, then a sample of about 4,096 positions through the rest
/// (a 1,000-address Endpoints object is 90 KB).
pub fn each_damaged(bytes: &[u8], mut f: impl FnMut(&[u8])) {
    let step = (bytes.len() / 4096).max(1);
    let positions = (0..bytes.len().min(4096)).chain((4096..bytes.len()).step_by(step));
    let mut flipped = bytes.to_vec();
    for i in positions {
        f(&bytes[..i]);
        flipped[i] ^= 0xff;
        f(&flipped);
        flipped[i] ^= 0xff;
    }
}
