//! How a user's password is known: in clear, or as one of the hashes MySQL's `mysql.user`
//! stores (`password_hash`), and the hash functions that define those forms.
//!
//! - `*` and 40 hex digits: `mysql_native_password`'s `SHA1(SHA1(password))`, what
//!   MariaDB's and MySQL's `PASSWORD('x')` return.
//! - `$A$005$` + 20 salt bytes + 43 characters: `caching_sha2_password`'s SHA256-crypt
//!   (Drepper's algorithm, as MySQL's `mysys/crypt_genhash_impl.cc` implements it: the
//!   salt is 20 bytes where the published algorithm stops at 16; the rounds are the 3 hex
//!   digits times 1,000). The salt may hold control characters, so the form may also be
//!   given in hex as `0x2441...`, as `SHOW CREATE USER` prints it.

use sha1::Sha1;
use sha2::{Digest, Sha256};

/// A user's password as the configuration gives it.
#[derive(Clone, PartialEq, Eq)]
pub enum Credential {
    /// The password itself.
    Password(String),
    /// `SHA1(SHA1(password))` (the `*HEX40` form).
    NativeHash([u8; 20]),
    /// The `$A$005$...` form.
    Sha2Crypt(Sha2Crypt),
}

impl std::fmt::Debug for Credential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never a password or a hash in logs or panics.
        f.write_str(match self {
            Self::Password(_) => "Password(..)",
            Self::NativeHash(_) => "NativeHash(..)",
            Self::Sha2Crypt(_) => "Sha2Crypt(..)",
        })
    }
}

/// A parsed `$A$<rounds>$<salt><digest>` hash.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sha2Crypt {
    /// SHA256 rounds (the 3 hex digits times 1,000; 5,000 for `005`).
    pub rounds: u32,
    /// The 20 salt bytes.
    pub salt: Vec<u8>,
    /// The 43 characters of the encoded digest.
    pub digest: Vec<u8>,
}

impl Sha2Crypt {
    /// Whether `password` hashes to this value.
    pub fn matches(&self, password: &[u8]) -> bool {
        sha256_crypt(password, &self.salt, self.rounds).as_slice() == self.digest.as_slice()
    }
}

/// Parses a `password_hash` value; the error says which form was expected.
pub fn parse_hash(text: &str) -> Result<Credential, String> {
    if let Some(hex) = text.strip_prefix('*') {
        let bytes = decode_hex(hex)
            .filter(|b| b.len() == 20)
            .ok_or("`*` must be followed by 40 hex digits (SHA1(SHA1(password)))")?;
        return Ok(Credential::NativeHash(bytes.try_into().expect("20 bytes")));
    }
    let raw = match text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
        Some(hex) => decode_hex(hex).ok_or("`0x` must be followed by hex digits")?,
        None => text.as_bytes().to_vec(),
    };
    let form = "expected `*` and 40 hex digits (mysql_native_password) or `$A$005$` with a 20-byte salt and a 43-character digest (caching_sha2_password), the latter possibly in hex as 0x2441...";
    let rest = raw.strip_prefix(b"$A$").ok_or(form)?;
    let (count, rest) = rest.split_at_checked(3).ok_or(form)?;
    let rounds = std::str::from_utf8(count)
        .ok()
        .and_then(|c| u32::from_str_radix(c, 16).ok())
        .filter(|&n| n > 0)
        .ok_or(form)?;
    let rest = rest.strip_prefix(b"$").ok_or(form)?;
    if rest.len() != 20 + 43 {
        return Err(form.to_owned());
    }
    Ok(Credential::Sha2Crypt(Sha2Crypt {
        rounds: rounds * 1000,
        salt: rest[..20].to_vec(),
        digest: rest[20..].to_vec(),
    }))
}

fn decode_hex(text: &str) -> Option<Vec<u8>> {
    if text.len() % 2 != 0 || !text.is_ascii() {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).ok())
        .collect()
}

/// `SHA1(SHA1(password))`, what the `*HEX40` form holds.
pub fn native_hash(password: &[u8]) -> [u8; 20] {
    Sha1::digest(Sha1::digest(password)).into()
}

const B64: &[u8; 64] = b"./0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/// SHA256-crypt of `password` with `salt` (at most 20 bytes used, as MySQL does) and
/// `rounds` rounds: the 43 encoded characters that follow the salt.
pub fn sha256_crypt(password: &[u8], salt: &[u8], rounds: u32) -> [u8; 43] {
    let salt = &salt[..salt.len().min(20)];
    let b = Sha256::new()
        .chain_update(password)
        .chain_update(salt)
        .chain_update(password)
        .finalize();
    let mut a = Sha256::new().chain_update(password).chain_update(salt);
    let mut left = password.len();
    while left > 32 {
        a.update(b);
        left -= 32;
    }
    a.update(&b[..left]);
    let mut n = password.len();
    while n > 0 {
        if n & 1 == 1 {
            a.update(b);
        } else {
            a.update(password);
        }
        n >>= 1;
    }
    let mut a = a.finalize();
    let mut dp = Sha256::new();
    for _ in 0..password.len() {
        dp.update(password);
    }
    let p = repeat_to(&dp.finalize(), password.len());
    let mut ds = Sha256::new();
    for _ in 0..16 + usize::from(a[0]) {
        ds.update(salt);
    }
    let s = repeat_to(&ds.finalize(), salt.len());
    for i in 0..rounds {
        let mut c = Sha256::new();
        if i % 2 == 1 {
            c.update(&p);
        } else {
            c.update(a);
        }
        if i % 3 != 0 {
            c.update(&s);
        }
        if i % 7 != 0 {
            c.update(&p);
        }
        if i % 2 == 1 {
            c.update(a);
        } else {
            c.update(&p);
        }
        a = c.finalize();
    }
    encode(&a)
}

fn repeat_to(digest: &[u8], len: usize) -> Vec<u8> {
    digest.iter().copied().cycle().take(len).collect()
}

/// The crypt base-64 encoding of a SHA256 digest, in the algorithm's byte order.
fn encode(a: &[u8]) -> [u8; 43] {
    const GROUPS: [(usize, usize, usize); 10] = [
        (0, 10, 20),
        (21, 1, 11),
        (12, 22, 2),
        (3, 13, 23),
        (24, 4, 14),
        (15, 25, 5),
        (6, 16, 26),
        (27, 7, 17),
        (18, 28, 8),
        (9, 19, 29),
    ];
    let mut out = [0u8; 43];
    let mut at = 0;
    let mut put = |w: u32, n: usize| {
        let mut w = w;
        for _ in 0..n {
            out[at] = B64[(w & 0x3f) as usize];
            at += 1;
            w >>= 6;
        }
    };
    for (x, y, z) in GROUPS {
        put(
            u32::from(a[x]) << 16 | u32::from(a[y]) << 8 | u32::from(a[z]),
            4,
        );
    }
    put(u32::from(a[31]) << 8 | u32::from(a[30]), 3);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sha256_crypt_matches_the_published_vectors() {
        // Drepper's specification (salts of at most 16 bytes, where MySQL's variant and
        // the published one agree); the same values as `openssl passwd -5`.
        let got = sha256_crypt(b"Hello world!", b"saltstring", 5000);
        assert_eq!(&got, b"5B8vYYiY.CVt1RlTTf8KbXBH3hsxY/GNooZaBBGWEc5");
        let got = sha256_crypt(b"Hello world!", b"saltstringsaltst", 10000);
        assert_eq!(&got, b"3xv.VbSHBb41AL9AvLeujZkZRBAwqFMz2.opqey6IcA");
    }

    #[test]
    fn a_mysql_caching_sha2_hash_with_a_20_byte_salt_verifies() {
        // authentication_string of a MySQL 8 user with password `foobar` (hex, as SHOW
        // CREATE USER prints it; the salt holds control characters).
        let hash = "0x24412430303524031A69251C34295C4B35167C7F1E5A7B63091349503974624D34504B5A424679354856336868686F52485A736E4A733368786E427575516C73446469496537";
        let Credential::Sha2Crypt(c) = parse_hash(hash).unwrap() else {
            panic!("not a caching_sha2 hash")
        };
        assert_eq!(c.rounds, 5000);
        assert!(c.matches(b"foobar"));
        assert!(!c.matches(b"not_foobar"));
    }

    #[test]
    fn native_hashes_are_sha1_of_sha1() {
        // MariaDB: SELECT PASSWORD('app') = '*5BCB3E6AC345B435C7C2E6B7949A04CE6F6563D3'.
        let Credential::NativeHash(h) =
            parse_hash("*5BCB3E6AC345B435C7C2E6B7949A04CE6F6563D3").unwrap()
        else {
            panic!("not a native hash")
        };
        assert_eq!(h, native_hash(b"app"));
    }

    #[test]
    fn malformed_hashes_are_refused() {
        for bad in ["*12", "$A$005$short", "plain", "0xzz", "$A$000$"] {
            assert!(parse_hash(bad).is_err(), "{bad}");
        }
    }
}
