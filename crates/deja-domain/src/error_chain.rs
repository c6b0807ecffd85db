//! One line for an error and its causes, the form every log and failure message uses.

/// `error: cause: cause…` on one line. A cause whose text the line already holds is skipped:
/// many error types repeat their source in their own message, and printing it twice hides the
/// cause that adds something.
pub fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    enum Outer {
        #[error("connect failed")]
        Wraps(#[source] Inner),
        #[error("connect failed: {0}")]
        Repeats(#[source] Inner),
    }

    #[derive(Debug, thiserror::Error)]
    #[error("connection refused")]
    struct Inner;

    #[test]
    fn causes_follow_the_error_on_one_line() {
        assert_eq!(
            error_chain(&Outer::Wraps(Inner)),
            "connect failed: connection refused"
        );
    }

    #[test]
    fn a_cause_the_message_already_shows_is_not_repeated() {
        assert_eq!(
            error_chain(&Outer::Repeats(Inner)),
            "connect failed: connection refused"
        );
    }
}
