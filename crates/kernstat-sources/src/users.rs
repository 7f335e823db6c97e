//! User accounts, through the C library's getpwuid_r/getpwnam_r (so NSS sources such as
//! LDAP or systemd-userdb work, not just /etc/passwd). The one place kernstat turns uids
//! into names and back: `ps` columns, `ps --user`, the daemon's `user.name`, and
//! `daemon --user/--allow`.

use std::collections::HashMap;
use std::ffi::{CStr, CString};

/// One account.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct User {
    /// Login name.
    pub name: String,
    /// User id.
    pub uid: u32,
    /// Primary group id.
    pub gid: u32,
    /// Home directory.
    pub home: String,
}

/// Both lookups share this: `call` fills a passwd record through the buffer we own.
fn lookup(
    call: impl Fn(&mut libc::passwd, &mut [libc::c_char], &mut *mut libc::passwd) -> libc::c_int,
) -> Option<User> {
    let mut buf = vec![0 as libc::c_char; 16 * 1024];
    // SAFETY: passwd is plain data; the record's strings point into `buf`, which outlives
    // their use here.
    unsafe {
        let mut pwd: libc::passwd = std::mem::zeroed();
        let mut result: *mut libc::passwd = std::ptr::null_mut();
        if call(&mut pwd, &mut buf, &mut result) != 0 || result.is_null() {
            return None;
        }
        Some(User {
            name: CStr::from_ptr(pwd.pw_name).to_string_lossy().into_owned(),
            uid: pwd.pw_uid,
            gid: pwd.pw_gid,
            home: CStr::from_ptr(pwd.pw_dir).to_string_lossy().into_owned(),
        })
    }
}

/// The account with this uid.
pub fn by_uid(uid: u32) -> Option<User> {
    // SAFETY: getpwuid_r writes into pwd and buf, whose sizes we pass.
    lookup(|pwd, buf, out| unsafe { libc::getpwuid_r(uid, pwd, buf.as_mut_ptr(), buf.len(), out) })
}

/// The account with this name.
pub fn by_name(name: &str) -> Option<User> {
    let c = CString::new(name).ok()?;
    // SAFETY: getpwnam_r writes into pwd and buf, whose sizes we pass; c is NUL-terminated.
    lookup(|pwd, buf, out| unsafe {
        libc::getpwnam_r(c.as_ptr(), pwd, buf.as_mut_ptr(), buf.len(), out)
    })
}

/// A name, or a number taken as a uid (an account need not exist for it; its group is
/// then the same number).
pub fn by_name_or_uid(s: &str) -> Option<User> {
    match s.parse::<u32>() {
        Ok(uid) => Some(by_uid(uid).unwrap_or(User {
            name: s.to_string(),
            uid,
            gid: uid,
            home: "/".to_string(),
        })),
        Err(_) => by_name(s),
    }
}

/// uid -> name, looked up once per uid (a table shows the same few users on many rows);
/// a uid without an account shows as its number.
#[derive(Clone, Debug, Default)]
pub struct UserNames {
    cache: HashMap<u32, String>,
}

impl UserNames {
    /// The name of `uid`.
    pub fn name(&mut self, uid: u32) -> &str {
        self.cache
            .entry(uid)
            .or_insert_with(|| by_uid(uid).map_or_else(|| uid.to_string(), |u| u.name))
    }
}

/// The id of the group with this name (getgrnam_r), None when there is none.
pub fn group_id(name: &str) -> Option<u32> {
    let c = CString::new(name).ok()?;
    let mut buf = vec![0 as libc::c_char; 16 * 1024];
    // SAFETY: group is plain data; getgrnam_r writes into grp and buf, whose sizes we
    // pass; c is NUL-terminated; only the gid is read.
    unsafe {
        let mut grp: libc::group = std::mem::zeroed();
        let mut result: *mut libc::group = std::ptr::null_mut();
        if libc::getgrnam_r(
            c.as_ptr(),
            &mut grp,
            buf.as_mut_ptr(),
            buf.len(),
            &mut result,
        ) != 0
            || result.is_null()
        {
            return None;
        }
        Some(grp.gr_gid)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_both_ways() {
        let r = by_uid(0).expect("uid 0 has an account");
        assert_eq!((r.name.as_str(), r.gid), ("root", 0));
        assert_eq!(by_name("root"), Some(r.clone()));
        assert_eq!(by_name_or_uid("0"), Some(r));
        assert_eq!(by_name_or_uid("4000000").map(|u| u.gid), Some(4_000_000));
        assert_eq!(by_name("no-such-user-here"), None);
    }
}
