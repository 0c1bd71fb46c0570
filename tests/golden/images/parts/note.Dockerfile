# a comment
