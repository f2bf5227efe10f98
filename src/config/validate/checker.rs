//! Errors of validation, each naming the file and line it is about.

use std::ops::Range;

use toml::Spanned;

use crate::config::model::{ConfigError, DatasourceId};

/// Errors carry the file name and a line computed from a byte offset.
pub(super) struct Checker<'a> {
    pub(super) text: &'a str,
    pub(super) origin: &'a str,
}

impl Checker<'_> {
    pub(super) fn err(
        &self,
        span: Option<Range<usize>>,
        message: impl Into<String>,
    ) -> ConfigError {
        let line = span.filter(|s| s.end > 0).map(|s| {
            self.text[..s.start.min(self.text.len())]
                .matches('\n')
                .count()
                + 1
        });
        ConfigError {
            origin: self.origin.to_owned(),
            line,
            message: message.into(),
        }
    }

    pub(super) fn at<T>(&self, value: &Spanned<T>, message: impl Into<String>) -> ConfigError {
        self.err(Some(value.span()), message)
    }
}

/// Resolves a datasource name written at some key.
pub(super) type DatasourceLookup<'a> =
    dyn Fn(&Spanned<String>, &str) -> Result<DatasourceId, ConfigError> + 'a;
