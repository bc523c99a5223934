//! Files only this user may read: the data dir, the database, the master key.

/// Creates `dir` and its missing parents, readable by this user only (on Unix): the data dir
/// holds the database (sealed wallet keys, key hashes, transaction history) and the master
/// key. A directory that exists keeps its mode.
pub fn create_private_dir(dir: &std::path::Path) -> std::io::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        builder.mode(0o700);
    }
    builder.create(dir)
}

/// Creates the file `path`, which must not exist yet, for writing, readable by this user
/// only (on Unix): the database, the master key.
pub fn create_private_file(path: &std::path::Path) -> std::io::Result<std::fs::File> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    options.open(path)
}
