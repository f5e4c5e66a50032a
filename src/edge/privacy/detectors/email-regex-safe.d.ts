// email-regex-safe ships no types; this is the part of its options the email detector uses.
declare module 'email-regex-safe' {
  interface EmailRegexOptions {
    re2?: boolean;
    exact?: boolean;
    strict?: boolean;
    gmail?: boolean;
    utf8?: boolean;
    localhost?: boolean;
    ipv4?: boolean;
    ipv6?: boolean;
    tlds?: readonly string[];
    returnString?: boolean;
  }
  function emailRegexSafe(options: EmailRegexOptions & { returnString: true }): string;
  function emailRegexSafe(options?: EmailRegexOptions): RegExp;
  export default emailRegexSafe;
}
