//! Which process of a distributed job this is: rank, world size, local rank.

use std::ffi::OsString;

use crate::error::{escape_bytes, Error, ErrorKind, Result};

/// The position of this process in a data-parallel job, as torchrun describes it.
///
/// `rank` is in `0..world_size`. `local_rank` (the process's index on its machine, usually the
/// GPU it drives) does not affect sharding; it is kept for the caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DistInfo {
    rank: u64,
    world_size: u64,
    local_rank: Option<u64>,
}

impl DistInfo {
    /// The largest world size accepted (2^32).
    pub const MAX_WORLD_SIZE: u64 = 1 << 32;

    /// Rank `rank` of `world_size` processes.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidArgument`] when `world_size` is 0 or above [`Self::MAX_WORLD_SIZE`], or
    /// `rank >= world_size`.
    pub fn new(rank: u64, world_size: u64) -> Result<Self> {
        if world_size == 0 || world_size > Self::MAX_WORLD_SIZE {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                format!(
                    "world size {world_size} is not in 1..={}",
                    Self::MAX_WORLD_SIZE
                ),
            ));
        }
        if rank >= world_size {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                format!("rank {rank} is not below the world size {world_size}"),
            ));
        }
        Ok(Self {
            rank,
            world_size,
            local_rank: None,
        })
    }

    /// A single process: rank 0 of 1.
    pub fn single() -> Self {
        Self {
            rank: 0,
            world_size: 1,
            local_rank: None,
        }
    }

    /// The same position with a local rank attached.
    pub fn with_local_rank(mut self, local_rank: u64) -> Self {
        self.local_rank = Some(local_rank);
        self
    }

    /// Reads torchrun's `RANK`, `WORLD_SIZE` and `LOCAL_RANK` from the process environment.
    ///
    /// With neither `RANK` nor `WORLD_SIZE` set, this is [`Self::single`] (a plain `python
    /// train.py` run). `LOCAL_RANK` is optional. Values are decimal integers; surrounding
    /// whitespace is allowed, as Python's `int()` allows it.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidDistEnv`], naming the variable and its value, when only one of `RANK`
    /// and `WORLD_SIZE` is set, a value is not a non-negative integer (or not UTF-8),
    /// `WORLD_SIZE` is 0 or above [`Self::MAX_WORLD_SIZE`], or `RANK` or `LOCAL_RANK` is not below
    /// `WORLD_SIZE`.
    pub fn from_env() -> Result<Self> {
        Self::from_lookup(|name| std::env::var_os(name))
    }

    /// As [`Self::from_env`], with the variables read through `lookup` (for launchers that pass
    /// an environment of their own, and for tests).
    ///
    /// # Errors
    /// As [`Self::from_env`].
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<OsString>) -> Result<Self> {
        let rank = parse_var("RANK", lookup("RANK"))?;
        let world_size = parse_var("WORLD_SIZE", lookup("WORLD_SIZE"))?;
        let local_rank = parse_var("LOCAL_RANK", lookup("LOCAL_RANK"))?;
        let mut info = match (rank, world_size) {
            (None, None) => Self::single(),
            (Some(_), None) | (None, Some(_)) => {
                let (set, unset) = if rank.is_some() {
                    ("RANK", "WORLD_SIZE")
                } else {
                    ("WORLD_SIZE", "RANK")
                };
                return Err(env_error(format!(
                    "{set} is set but {unset} is not; launch with torchrun or set both"
                )));
            }
            (Some(rank), Some(world_size)) => Self::new(rank, world_size).map_err(|e| {
                env_error(format!(
                    "RANK={rank}, WORLD_SIZE={world_size}: {}",
                    e.reason()
                ))
            })?,
        };
        if let Some(local_rank) = local_rank {
            if local_rank >= info.world_size {
                return Err(env_error(format!(
                    "LOCAL_RANK={local_rank} is not below WORLD_SIZE={}",
                    info.world_size
                )));
            }
            info.local_rank = Some(local_rank);
        }
        Ok(info)
    }

    /// This process's rank, in `0..world_size`.
    pub fn rank(&self) -> u64 {
        self.rank
    }

    /// The number of processes that share the data.
    pub fn world_size(&self) -> u64 {
        self.world_size
    }

    /// This process's index on its machine, when known.
    pub fn local_rank(&self) -> Option<u64> {
        self.local_rank
    }
}

impl Default for DistInfo {
    fn default() -> Self {
        Self::single()
    }
}

fn env_error(reason: String) -> Error {
    Error::new(ErrorKind::InvalidDistEnv, reason)
}

/// Parses an optional environment value as a `u64`, naming the variable on failure.
fn parse_var(name: &str, value: Option<OsString>) -> Result<Option<u64>> {
    let Some(value) = value else {
        return Ok(None);
    };
    let shown = escape_bytes(value.as_encoded_bytes());
    value
        .to_str()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(Some)
        .ok_or_else(|| env_error(format!("{name}=\"{shown}\" is not a non-negative integer")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lookup(vars: &[(&str, &str)]) -> Result<DistInfo> {
        DistInfo::from_lookup(|name| {
            vars.iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| OsString::from(v))
        })
    }

    #[test]
    fn env_values_are_parsed() {
        assert_eq!(lookup(&[]).unwrap(), DistInfo::single());
        let d = lookup(&[("RANK", "3"), ("WORLD_SIZE", " 8\n"), ("LOCAL_RANK", "1")]).unwrap();
        assert_eq!((d.rank(), d.world_size(), d.local_rank()), (3, 8, Some(1)));
    }

    #[test]
    fn malformed_env_values_name_the_variable() {
        for (vars, needle) in [
            (&[("RANK", "x"), ("WORLD_SIZE", "2")][..], "RANK=\"x\""),
            (&[("RANK", "-1"), ("WORLD_SIZE", "2")][..], "RANK=\"-1\""),
            (&[("RANK", "0"), ("WORLD_SIZE", "")][..], "WORLD_SIZE=\"\""),
            (
                &[("RANK", "2"), ("WORLD_SIZE", "2")][..],
                "not below the world size",
            ),
            (&[("RANK", "0"), ("WORLD_SIZE", "0")][..], "world size 0"),
            (&[("RANK", "0")][..], "WORLD_SIZE is not"),
            (&[("WORLD_SIZE", "4")][..], "RANK is not"),
            (
                &[("RANK", "0"), ("WORLD_SIZE", "2"), ("LOCAL_RANK", "5")][..],
                "LOCAL_RANK=5",
            ),
        ] {
            let err = lookup(vars).unwrap_err();
            assert_eq!(err.kind(), ErrorKind::InvalidDistEnv);
            assert!(err.to_string().contains(needle), "{err} lacks {needle}");
        }
    }

    #[cfg(unix)]
    #[test]
    fn non_utf8_env_value_is_escaped() {
        use std::os::unix::ffi::OsStringExt;
        let err = DistInfo::from_lookup(|name| {
            (name == "RANK").then(|| OsString::from_vec(b"\xff1".to_vec()))
        })
        .unwrap_err();
        assert!(err.to_string().contains("RANK=\"\\xff1\""), "{err}");
    }
}
