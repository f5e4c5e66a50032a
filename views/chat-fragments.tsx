/** @jsxImportSource hono/jsx */
/**
 * A chat's pieces: the user's turn, the assistant's (a run panel streaming its reply, run-fragments.tsx), a
 * message the edge refused, the reply's figures with its prompt's cached share, and the two controls the
 * server sets out of band (the chat's id, and the Send button turned off while a reply is written).
 *
 * @example
 * String(<PromptCacheLine metrics={{ promptTokens: 212, cachedTokens: 198 }} />)
 * // '<p class="prompt-cache" ... data-prompt-tokens="212" data-cached-tokens="198">prompt 212 tokens, 198 from cache</p>'
 */
import type { ViewMetrics as GenerationMetrics, ViewMode as Mode, ViewRequest as GenerationRequest } from './view-model.ts';
import { MarkedText } from './marked-text.tsx';
import { MetricsPanel, RunPanel } from './run-fragments.tsx';

/** `privateTexts`: what the message marked private, highlighted in it. */
export function UserTurn(props: { message: string; refused?: boolean; privateTexts?: readonly string[] }) {
  return (
    <li class={props.refused ? 'turn turn-user refused' : 'turn turn-user'} data-testid="user-turn">
      <p class="bubble">
        <MarkedText text={props.message} values={props.privateTexts} />
      </p>
    </li>
  );
}

/** The assistant's turn: the reply streams into it token by token, coloured and scored as a run's text. */
export function AssistantTurn(props: { id: string; request: GenerationRequest }) {
  return (
    <li class="turn turn-assistant" data-testid="assistant-turn">
      <RunPanel id={props.id} request={props.request} title="assistant" reply />
    </li>
  );
}

/** A message the edge would not answer, and why, where its reply would have been; the conversation is unchanged. */
export function RefusedTurn(props: { message: string; error: string }) {
  return (
    <>
      {props.message === '' ? null : <UserTurn message={props.message} refused />}
      <li class="turn turn-error" data-testid="refused-turn">
        <div class="error" role="alert">
          Not sent: {props.error}
        </div>
      </li>
    </>
  );
}

/** Shown while the chat has no turn; the CSS hides it once a turn follows it. */
export function EmptyChat() {
  return (
    <li class="turn empty" data-testid="empty-chat">
      Type a message below to start. Each reply streams in token by token; tap a token for its router score and timings.
    </li>
  );
}

/** How much of the turn's prompt (the whole conversation so far) was restored from the prompt cache instead of prefilled. */
export function PromptCacheLine(props: { metrics: Pick<GenerationMetrics, 'promptTokens' | 'cachedTokens'> }) {
  const { promptTokens, cachedTokens } = props.metrics;
  return (
    <p class="prompt-cache" data-testid="prompt-cache" data-prompt-tokens={String(promptTokens)} data-cached-tokens={String(cachedTokens)}>
      prompt {promptTokens} tokens, {cachedTokens} from cache
    </p>
  );
}

/**
 * A finished reply's figures: the prompt cache's share first (what a chat's later turns save), then the run's
 * panel, with what the cloud saw of the conversation (`cloudText`).
 */
export function ReplyFigures(props: { metrics: GenerationMetrics; mode: Mode; cloudText: string }) {
  return (
    <>
      <PromptCacheLine metrics={props.metrics} />
      <MetricsPanel metrics={props.metrics} mode={props.mode} cloudText={props.cloudText} />
    </>
  );
}

/** The chat's id, which each turn sends; empty until the first turn is accepted (the server sets it then, out of band). */
export function ChatIdInput(props: { id: string; oob?: boolean }) {
  return <input type="hidden" id="chat-id" name="chat" value={props.id} hx-swap-oob={props.oob ? 'true' : undefined} />;
}

/**
 * Disabled while a reply is being written: the server sends it disabled with the new turn, and the page
 * turns it back on when the reply's stream closes (chat.js), whatever ended it: the reply's end, a
 * reconnect told the reply is over, New chat removing it. The server refuses a message sent before then.
 */
export function SendButton(props: { disabled?: boolean; oob?: boolean }) {
  return (
    <button id="chat-send" type="submit" disabled={props.disabled} hx-swap-oob={props.oob ? 'true' : undefined}>
      Send
    </button>
  );
}
