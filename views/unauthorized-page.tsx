/** @jsxImportSource hono/jsx */
/**
 * What a browser gets when this edge wants its access token and none (or a wrong one) came: a page with a
 * field for it. The form sends it as `?token=` to the page that was asked for, which sets the cookie.
 */
import { Layout } from './layout.tsx';

export function UnauthorizedPage(props: { path: string; retried: boolean }) {
  return (
    <Layout title="Access token · Edge token router" signedOut>
      <form class="controls token-form" method="get" action={props.path}>
        <div class="wide">
          <h2>This edge needs its access token</h2>
          {props.retried ? (
            <p class="error" role="alert">
              That token is wrong; try again.
            </p>
          ) : (
            <p class="legend">Ask whoever runs this device for it; this browser keeps it afterwards.</p>
          )}
        </div>
        <div class="wide">
          <label for="token">Access token</label>
          <input id="token" name="token" type="password" autocomplete="current-password" required autofocus />
        </div>
        <div class="wide">
          <button type="submit">Open</button>
        </div>
      </form>
    </Layout>
  );
}
