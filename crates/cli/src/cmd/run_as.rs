//! Whom `nena run` starts CMD as. `nena run` needs root (cgroups, BPF), but CMD need not:
//! under sudo it runs as the user who called sudo (`SUDO_UID`, `SUDO_GID`, and that user's
//! supplementary groups, `HOME`, `USER`, `LOGNAME` and `SHELL` from the passwd database),
//! `--user NAME|UID` names the user explicitly, and plain root with neither keeps CMD as
//! root and says so once. The identity is looked up before the fork; the child only makes
//! system calls ([`RunAs::drop_privileges`]) after it joined its cgroup, whose membership
//! (and so the BPF programs that carry its traffic) does not depend on its user, and which
//! it can no longer leave (the cgroup files are root's).

use anyhow::{anyhow, bail, Result};
use std::ffi::{CStr, CString};
use std::path::PathBuf;

/// The user CMD runs as, looked up in the parent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunAs {
    pub uid: u32,
    pub gid: u32,
    /// Supplementary groups (the primary group included, as `id -G` lists them).
    pub groups: Vec<libc::gid_t>,
    /// From the passwd database, when the user has an entry there.
    pub name: Option<String>,
    pub home: Option<PathBuf>,
    pub shell: Option<PathBuf>,
}

/// One entry of the passwd database.
struct Passwd {
    name: String,
    uid: u32,
    gid: u32,
    home: PathBuf,
    shell: PathBuf,
}

fn cstr_path(p: *const libc::c_char) -> PathBuf {
    use std::os::unix::ffi::OsStrExt;
    if p.is_null() {
        return PathBuf::new();
    }
    // SAFETY: a NUL-terminated string of the passwd entry, valid while its buffer lives.
    PathBuf::from(std::ffi::OsStr::from_bytes(
        unsafe { CStr::from_ptr(p) }.to_bytes(),
    ))
}

/// getpwnam_r / getpwuid_r, by name or by uid.
fn passwd(name: Option<&str>, uid: u32) -> Result<Option<Passwd>> {
    let cname = match name {
        Some(n) => Some(CString::new(n).map_err(|_| anyhow!("a user name with a NUL byte"))?),
        None => None,
    };
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        // SAFETY: zeroed passwd is a valid out-parameter; the buffer outlives its use.
        let mut pw: libc::passwd = unsafe { std::mem::zeroed() };
        let mut out: *mut libc::passwd = std::ptr::null_mut();
        // SAFETY: all pointers are to live locals of the stated sizes.
        let r = unsafe {
            match &cname {
                Some(c) => libc::getpwnam_r(
                    c.as_ptr(),
                    &mut pw,
                    buf.as_mut_ptr().cast(),
                    buf.len(),
                    &mut out,
                ),
                None => {
                    libc::getpwuid_r(uid, &mut pw, buf.as_mut_ptr().cast(), buf.len(), &mut out)
                }
            }
        };
        if r == libc::ERANGE && buf.len() < 1 << 20 {
            buf.resize(buf.len() * 4, 0);
            continue;
        }
        if r != 0 {
            bail!(
                "reading the passwd database: {}",
                std::io::Error::from_raw_os_error(r)
            );
        }
        if out.is_null() {
            return Ok(None);
        }
        return Ok(Some(Passwd {
            // SAFETY: pw_name points into `buf`, NUL-terminated.
            name: unsafe { CStr::from_ptr(pw.pw_name) }
                .to_string_lossy()
                .into_owned(),
            uid: pw.pw_uid,
            gid: pw.pw_gid,
            home: cstr_path(pw.pw_dir),
            shell: cstr_path(pw.pw_shell),
        }));
    }
}

/// The groups of `name` whose primary group is `gid` (getgrouplist).
fn groups_of(name: &str, gid: u32) -> Result<Vec<libc::gid_t>> {
    let c = CString::new(name).map_err(|_| anyhow!("a user name with a NUL byte"))?;
    let mut n: libc::c_int = 64;
    loop {
        let mut groups: Vec<libc::gid_t> = vec![0; n as usize];
        let want = n;
        // SAFETY: `groups` holds `n` entries; getgrouplist writes at most that many and
        // sets `n` to the number it found.
        let r = unsafe { libc::getgrouplist(c.as_ptr(), gid, groups.as_mut_ptr(), &mut n) };
        if r >= 0 {
            groups.truncate(n as usize);
            return Ok(groups);
        }
        if n <= want {
            n = want * 2;
        }
        if n > 1 << 16 {
            bail!("{name} is in too many groups");
        }
    }
}

impl RunAs {
    fn from_passwd(p: Passwd, gid: u32) -> Result<RunAs> {
        let mut groups = groups_of(&p.name, gid)?;
        if !groups.contains(&gid) {
            groups.insert(0, gid);
        }
        Ok(RunAs {
            uid: p.uid,
            gid,
            groups,
            name: Some(p.name),
            home: Some(p.home),
            shell: Some(p.shell),
        })
    }

    /// A uid with no passwd entry: its group alone, home `/`.
    fn bare(uid: u32, gid: u32) -> RunAs {
        RunAs {
            uid,
            gid,
            groups: vec![gid],
            name: None,
            home: None,
            shell: None,
        }
    }

    /// The environment CMD gets on top of nena's (which the caller passes on).
    pub fn env(&self) -> Vec<(&'static str, std::ffi::OsString)> {
        let name = self.name.clone().unwrap_or_else(|| self.uid.to_string());
        let home = self.home.clone().unwrap_or_else(|| PathBuf::from("/"));
        let mut v = vec![
            ("HOME", home.into_os_string()),
            ("USER", name.clone().into()),
            ("LOGNAME", name.into()),
        ];
        if let Some(s) = &self.shell {
            v.push(("SHELL", s.clone().into_os_string()));
        }
        v
    }

    /// In the child between fork and exec: the groups, then the group, then the user (real,
    /// effective and saved), so that none of root's is left. Only system calls.
    ///
    /// # Safety
    /// Call only in the child between fork and exec.
    pub unsafe fn drop_privileges(&self) -> std::io::Result<()> {
        if libc::setgroups(self.groups.len(), self.groups.as_ptr()) != 0
            || libc::setresgid(self.gid, self.gid, self.gid) != 0
            || libc::setresuid(self.uid, self.uid, self.uid) != 0
        {
            return Err(std::io::Error::last_os_error());
        }
        // Root cannot be regained.
        if libc::setuid(0) == 0 && self.uid != 0 {
            return Err(std::io::Error::from_raw_os_error(libc::EPERM));
        }
        Ok(())
    }
}

/// What decided whom CMD runs as, for the one line nena logs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Why {
    /// `--user`.
    Named,
    /// `SUDO_UID` (nena runs under sudo).
    Sudo,
}

/// Whom CMD runs as: `user` (`--user`), else under sudo (`sudo_uid`, `sudo_gid` from the
/// environment, with `euid` 0) the user who called it; None: as nena itself (root with
/// neither: the caller says so). Errors: an unknown user, a malformed SUDO_UID or
/// SUDO_GID, `--user` for another user without root.
pub fn resolve(
    user: Option<&str>,
    sudo_uid: Option<&str>,
    sudo_gid: Option<&str>,
    euid: u32,
) -> Result<Option<(RunAs, Why)>> {
    if let Some(u) = user {
        let p = match u.parse::<u32>() {
            Ok(uid) => passwd(None, uid)?.ok_or_else(|| {
                anyhow!("--user {uid}: no user has this uid in the passwd database")
            })?,
            Err(_) => passwd(Some(u), 0)?
                .ok_or_else(|| anyhow!("--user {u}: no such user in the passwd database"))?,
        };
        if p.uid != euid && euid != 0 {
            bail!(
                "--user {u}: nena run is not root (uid {euid}), so it cannot start CMD as \
                 another user"
            );
        }
        let gid = p.gid;
        return Ok(Some((RunAs::from_passwd(p, gid)?, Why::Named)));
    }
    if euid != 0 {
        return Ok(None);
    }
    let Some(uid) = sudo_uid else {
        return Ok(None);
    };
    let uid: u32 = uid
        .trim()
        .parse()
        .map_err(|_| anyhow!("SUDO_UID={uid:?} is not a uid (unset it, or pass --user)"))?;
    let gid: Option<u32> = match sudo_gid {
        Some(g) => Some(
            g.trim()
                .parse()
                .map_err(|_| anyhow!("SUDO_GID={g:?} is not a gid (unset it, or pass --user)"))?,
        ),
        None => None,
    };
    if uid == 0 {
        return Ok(None);
    }
    let r = match passwd(None, uid)? {
        Some(p) => {
            let gid = gid.unwrap_or(p.gid);
            RunAs::from_passwd(p, gid)?
        }
        None => RunAs::bare(uid, gid.unwrap_or(uid)),
    };
    Ok(Some((r, Why::Sudo)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sudo_names_the_user_and_plain_root_stays_root() {
        // nobody is 65534 on Debian; root is 0 everywhere.
        let (r, why) = resolve(None, Some("65534"), Some("65534"), 0)
            .unwrap()
            .unwrap();
        assert_eq!(why, Why::Sudo);
        assert_eq!((r.uid, r.gid), (65534, 65534));
        assert!(r.groups.contains(&65534), "{r:?}");
        assert!(!r.groups.contains(&0), "no group of root's: {r:?}");
        let env = r.env();
        assert!(env.iter().any(|(k, _)| *k == "HOME"));
        assert_eq!(resolve(None, None, None, 0).unwrap(), None);
        assert_eq!(resolve(None, Some("0"), Some("0"), 0).unwrap(), None);
        // Not root: SUDO_UID means nothing (nena cannot change users anyway).
        assert_eq!(resolve(None, Some("65534"), None, 1000).unwrap(), None);
        // A uid without a passwd entry: its own group, home /.
        let (r, _) = resolve(None, Some("4000000"), Some("4000001"), 0)
            .unwrap()
            .unwrap();
        assert_eq!(
            (r.uid, r.gid, r.groups.clone()),
            (4000000, 4000001, vec![4000001])
        );
        assert!(r.env().contains(&("HOME", "/".into())));
    }

    #[test]
    fn user_by_name_or_uid_and_bad_input_is_refused() {
        let (by_name, why) = resolve(Some("root"), Some("65534"), None, 0)
            .unwrap()
            .unwrap();
        assert_eq!(why, Why::Named, "--user wins over SUDO_UID");
        assert_eq!(by_name.uid, 0);
        let (by_uid, _) = resolve(Some("65534"), None, None, 0).unwrap().unwrap();
        assert_eq!(by_uid.uid, 65534);
        assert_eq!(by_uid.name.as_deref(), Some("nobody"));
        let e = resolve(Some("no-such-user-nena"), None, None, 0).unwrap_err();
        assert!(e.to_string().contains("no such user"), "{e}");
        let e = resolve(Some("4000000"), None, None, 0).unwrap_err();
        assert!(e.to_string().contains("no user has this uid"), "{e}");
        let e = resolve(None, Some("abc"), None, 0).unwrap_err();
        assert!(e.to_string().contains("SUDO_UID"), "{e}");
        let e = resolve(None, Some("65534"), Some("x"), 0).unwrap_err();
        assert!(e.to_string().contains("SUDO_GID"), "{e}");
        let e = resolve(Some("nobody"), None, None, 1000).unwrap_err();
        assert!(e.to_string().contains("not root"), "{e}");
    }
}
