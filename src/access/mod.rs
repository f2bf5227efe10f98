//! What a client must show to connect, kept apart from the wire so the shared state
//! ([`crate::proxy`]) can hold it: the listener's TLS and RSA material ([`tls`]), the
//! logins learned so far ([`Logins`]), and checking what a client proves about its password,
//! for the two plugins the proxy speaks.
//!
//! - `mysql_native_password`: the client sends `SHA1(pw) XOR SHA1(nonce + SHA1(SHA1(pw)))`;
//!   knowing `SHA1(SHA1(pw))` (the password, or the `*HEX40` hash) is enough to check it:
//!   XOR out the second term and hash what is left.
//! - `caching_sha2_password` fast path: `SHA256(pw) XOR SHA256(SHA256(SHA256(pw)) + nonce)`,
//!   checked the same way against `SHA256(SHA256(pw))`, which the proxy learns at the first
//!   full authentication of a (user, password) and keeps in memory ([`Logins`]), as MySQL
//!   does; full authentication sends the password itself (inside TLS, or encrypted with the
//!   proxy's RSA key) and is checked against the password or the `$A$005$` hash.

mod logins;
pub mod tls;

pub use logins::{Logins, failure_delay};

use sha1::Sha1;
use sha2::{Digest, Sha256};

use crate::config::Credential;

/// A 20-byte scramble of printable characters (never NUL), fresh per connection.
pub fn scramble() -> [u8; 20] {
    use rand::Rng;
    let mut rng = rand::rng();
    std::array::from_fn(|_| rng.random_range(33u8..=126))
}

/// Equal in time independent of where the inputs differ.
pub fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn xor(a: &[u8], b: &[u8]) -> Vec<u8> {
    a.iter().zip(b).map(|(x, y)| x ^ y).collect()
}

/// Checks a `mysql_native_password` token (20 bytes; empty for an empty password).
pub fn native_ok(nonce: &[u8], token: &[u8], credential: &Credential) -> bool {
    let stage2: [u8; 20] = match credential {
        Credential::Password(p) if p.is_empty() => return token.is_empty(),
        Credential::Password(p) => crate::config::native_hash(p.as_bytes()),
        Credential::NativeHash(h) => *h,
        Credential::Sha2Crypt(_) => return false,
    };
    if token.len() != 20 {
        return false;
    }
    let mask = Sha1::new()
        .chain_update(nonce)
        .chain_update(stage2)
        .finalize();
    let stage1 = xor(token, &mask);
    same(&Sha1::digest(&stage1), &stage2)
}

/// Checks a `caching_sha2_password` fast-path token (32 bytes) against the cached
/// `SHA256(SHA256(pw))`.
pub fn sha2_fast_ok(nonce: &[u8], token: &[u8], stage2: &[u8; 32]) -> bool {
    if token.len() != 32 {
        return false;
    }
    let mask = Sha256::new()
        .chain_update(stage2)
        .chain_update(nonce)
        .finalize();
    let stage1 = xor(token, &mask);
    same(&Sha256::digest(&stage1), stage2)
}

/// Checks a password sent in full (TLS or RSA) against the configured credential; on a
/// match returns `SHA256(SHA256(pw))`, what the fast path needs next time.
pub fn full_ok(password: &[u8], credential: &Credential) -> Option<[u8; 32]> {
    let matches = match credential {
        Credential::Password(p) => same(p.as_bytes(), password),
        Credential::Sha2Crypt(h) => h.matches(password),
        Credential::NativeHash(h) => same(&crate::config::native_hash(password), h),
    };
    matches.then(|| Sha256::digest(Sha256::digest(password)).into())
}

/// Whether the credential is an empty password (the client then sends no token).
pub fn is_empty_password(credential: &Credential) -> bool {
    matches!(credential, Credential::Password(p) if p.is_empty())
}

/// The clear password inside an RSA-encrypted full authentication: the client encrypts
/// `(password + NUL) XOR nonce` (the nonce repeated) with RSA-OAEP (SHA1, as MySQL's
/// `RSA_PKCS1_OAEP_PADDING`). `None` when it does not decrypt.
pub fn rsa_password(key: &rsa::RsaPrivateKey, nonce: &[u8], cipher: &[u8]) -> Option<Vec<u8>> {
    let plain = key.decrypt(rsa::Oaep::new::<Sha1>(), cipher).ok()?;
    let mut password: Vec<u8> = plain
        .iter()
        .zip(nonce.iter().cycle())
        .map(|(p, n)| p ^ n)
        .collect();
    if password.last() == Some(&0) {
        password.pop();
    }
    Some(password)
}

#[cfg(test)]
mod tests {
    use super::*;
    use mysql_common::scramble::{scramble_native, scramble_sha256};

    const NONCE: &[u8; 20] = b"abcdefghijklmnopqrst";

    #[test]
    fn native_tokens_check_against_the_password_and_its_hash() {
        let token = scramble_native(NONCE, b"app").unwrap();
        let plain = Credential::Password("app".into());
        let hash = Credential::NativeHash(crate::config::native_hash(b"app"));
        assert!(native_ok(NONCE, &token, &plain));
        assert!(native_ok(NONCE, &token, &hash));
        let wrong = scramble_native(NONCE, b"other").unwrap();
        assert!(!native_ok(NONCE, &wrong, &plain));
        assert!(!native_ok(NONCE, &wrong, &hash));
        assert!(!native_ok(NONCE, b"", &plain));
        assert!(native_ok(NONCE, b"", &Credential::Password(String::new())));
    }

    #[test]
    fn sha2_fast_tokens_check_against_the_cached_stage2() {
        let stage2 = full_ok(b"app", &Credential::Password("app".into())).unwrap();
        let token = scramble_sha256(NONCE, b"app").unwrap();
        assert!(sha2_fast_ok(NONCE, &token, &stage2));
        let wrong = scramble_sha256(NONCE, b"apq").unwrap();
        assert!(!sha2_fast_ok(NONCE, &wrong, &stage2));
        assert!(!sha2_fast_ok(b"other nonce 12345678", &token, &stage2));
    }

    #[test]
    fn rsa_encrypted_passwords_decrypt() {
        use rsa::traits::PublicKeyParts;
        let mut rng = rand_core_rng();
        let key = rsa::RsaPrivateKey::new(&mut rng, 1024).unwrap();
        let public = key.to_public_key();
        let mut message = b"secret\0".to_vec();
        for (b, n) in message.iter_mut().zip(NONCE.iter().cycle()) {
            *b ^= n;
        }
        let cipher = public
            .encrypt(&mut rng, rsa::Oaep::new::<Sha1>(), &message)
            .unwrap();
        assert_eq!(cipher.len(), public.size());
        assert_eq!(rsa_password(&key, NONCE, &cipher).unwrap(), b"secret");
        assert!(rsa_password(&key, NONCE, &cipher[1..]).is_none());
    }

    fn rand_core_rng() -> impl rsa::rand_core::CryptoRngCore {
        rsa::rand_core::OsRng
    }
}
